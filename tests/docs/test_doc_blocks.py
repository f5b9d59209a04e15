"""Every runnable block of the user-facing docs runs as written against a test daemon (issue 31 §5).
One test per block, id `FILE:LINE` (the opening fence); the conventions are tests/docs/README.md."""

import os

import pytest

from doc_blocks import CLI_DIR, DOC_FILES, REPO, extract, failure_report, forbidden, runnable_blocks

BLOCKS = runnable_blocks()


@pytest.mark.parametrize("block", BLOCKS, ids=[b.id for b in BLOCKS])
def test_block_runs(block, doc_sessions):
    assert os.access(os.path.join(CLI_DIR, "sandfort"), os.X_OK), \
        f"no sandfort binary in {CLI_DIR} (set SANDFORT_BUILD_DIR or SANDFORT_CLI)"
    bad = forbidden(block)
    if bad:
        pytest.fail(f"{block.id}: the ```{block.lang} block runs `{bad}` (a build, a test suite, the CI or a "
                    f"deployment): a doc test must not; mark it `<!-- doc-test: not run: REASON -->`\n"
                    + block.numbered(), pytrace=False)
    session = doc_sessions.get(block.path)
    outcome = session.run(block)
    if outcome.code != 0:
        pytest.fail(failure_report(block, outcome, doc_sessions.daemon_log()), pytrace=False)


@pytest.mark.parametrize("path", DOC_FILES)
def test_every_fence_names_its_language(path):
    """A fence without a language would be neither run nor visibly exempt: `text` for output,
    `sh` for commands."""
    blocks, _ = extract(path)
    bare = [b.id for b in blocks if not b.lang]
    assert not bare, f"fences without a language (write ```text for output, ```sh for commands): {bare}"


@pytest.mark.parametrize("path", DOC_FILES)
def test_not_run_markers_give_a_reason(path):
    blocks, bad = extract(path)
    assert not bad, f"lines mentioning doc-test that are not `<!-- doc-test: not run: REASON -->`: {bad}"
    empty = [b.id for b in blocks if b.not_run is not None and not b.not_run.strip()]
    assert not empty, f"not-run markers without a reason: {empty}"
    misplaced = [b.id for b in blocks if b.not_run is not None and not b.runner]
    assert not misplaced, f"not-run markers on blocks that would not run anyway: {misplaced}"


def test_there_are_blocks_to_run():
    files = {b.path for b in BLOCKS}
    assert {"README.md", "docs/cli.md", "docs/sdk-python.md", "docs/sdk-typescript.md", "docs/mcp.md"} <= files, files


def test_scripts_run_prints_what_the_readme_runner_prints():
    """README's `./scripts/run` is replaced by printing the test daemon's URL and key in scripts/run's
    own words: check that scripts/run still says exactly that."""
    with open(os.path.join(REPO, "scripts", "run")) as f:
        text = f.read()
    assert "Sandfort is running at $URL" in text and "Admin API key: $KEY" in text
    assert "Console: $URL/console/" in text

