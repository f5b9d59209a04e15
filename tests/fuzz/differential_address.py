#!/usr/bin/python3
"""Differential check of the egress proxy's address handling against Python's ipaddress.

Usage: differential_address.py PATH/TO/proxy_classify [COUNT] [SEED]

Generates address spellings (edge cases of every special-purpose block, IPv4-mapped and the other
IPv6 forms that embed an IPv4 address, short and long IPv6 forms, legacy inet_aton spellings such
as 0x7f.1 and 2130706433, zone ids, garbage), asks proxy_classify for the proxy's view of each and
compares it with a reference built on ipaddress:

  1. the security property: an address the proxy would dial (class "public", not refused) must be
     is_global for ipaddress, also after unwrapping the IPv4 address an IPv6 form carries;
  2. the class itself must equal the reference class (below);
  3. the address the proxy reads (inet_pton for literals, getaddrinfo AI_NUMERICHOST for what the
     resolver returns for a numeric name) must equal the one Python reads;
  4. parse_request_target accepts a host exactly when it is a DNS-style name or a bracketed IPv6
     address without a zone id.

Intended differences (the proxy is stricter than ipaddress of Python 3.11; none lets more through):
  - multicast 224/4 is "multicast" for the proxy; ipaddress 3.11 calls it is_global.
  - 192.0.0.0/24 (all of it, not just /29 and .170/31) and 192.88.99.0/24 (6to4 relay anycast) are
    "reserved"; ipaddress 3.11 calls most of them global.
  - IPv6 forms that carry an IPv4 address (::ffff:0:0/96, ::/96, ::ffff:0:0:0/96, 64:ff9b::/96,
    2002::/16, Teredo 2001::/32) take the class of that IPv4 address; ipaddress 3.11 looks at the
    IPv6 address only (e.g. calls 2002:7f00:1:: global). The reference unwraps them the same way.
  - 64:ff9b:1::/48 (local-use NAT64) is reserved outright.
  - 0.0.0.0/8 is "unspecified" (ipaddress: only 0.0.0.0 is_unspecified, the rest is_private).
Exit status 0 when everything agrees, 1 on any disagreement (the first 40 are printed).
"""

import ipaddress
import random
import subprocess
import sys

IP4 = ipaddress.IPv4Address
IP6 = ipaddress.IPv6Address
N4 = ipaddress.IPv4Network
N6 = ipaddress.IPv6Network

PRIVATE4 = [N4("10.0.0.0/8"), N4("172.16.0.0/12"), N4("192.168.0.0/16")]
EXTRA_RESERVED4 = [N4("192.0.0.0/24"), N4("192.88.99.0/24")]  # stricter than ipaddress 3.11
CGNAT = N4("100.64.0.0/10")


def ref_class4(a):
    if a in N4("0.0.0.0/8"):
        return "unspecified"
    if a.is_loopback:
        return "loopback"
    if a.is_link_local:
        return "link-local"
    if a in CGNAT:
        return "cgnat"
    if a.is_multicast:
        return "multicast"
    if any(a in n for n in PRIVATE4):
        return "private"
    if a.is_reserved or a.is_private or any(a in n for n in EXTRA_RESERVED4):
        return "reserved"  # 240/4, 255.255.255.255, TEST-NETs, benchmarking, 192.0.0/24...
    assert a.is_global, a
    return "public"


def embedded4(a):
    """The IPv4 address(es) an IPv6 address carries, per include/sandfort/proxy/policy.hpp."""
    b = a.packed
    v4 = lambda off, inv=False: IP4(bytes((x ^ 0xFF) if inv else x for x in b[off:off + 4]))
    if b[:10] == bytes(10) and b[10:12] == b"\xff\xff":
        return [v4(12)]
    if b[:12] == bytes(12):
        return [v4(12)]
    if b[:8] == bytes(8) and b[8:12] == b"\xff\xff\0\0":
        return [v4(12)]
    if b[:4] == b"\x00\x64\xff\x9b" and b[4:12] == bytes(8):
        return [v4(12)]
    if b[:2] == b"\x20\x02":
        return [v4(2)]
    if b[:4] == b"\x20\x01\0\0":
        return [v4(12, True), v4(4)]  # Teredo: client (inverted), then server
    return None


def ref_class6(a):
    if a == IP6("::"):
        return "unspecified"
    if a == IP6("::1"):
        return "loopback"
    inner = embedded4(a)
    if inner is not None:
        for v in inner:
            c = ref_class4(v)
            if c != "public":
                return c
        return "public"
    if a in N6("64:ff9b:1::/48") or a in N6("2001:db8::/32") or a in N6("2001::/23") or a in N6("3fff::/20"):
        return "reserved"
    if a in N6("fc00::/7") or a.is_site_local:
        return "private"
    if a.is_link_local:
        return "link-local"
    if a.is_multicast:
        return "multicast"
    if a not in N6("2000::/3"):
        return "reserved"
    assert a.is_global, a
    return "public"


def ref_class(a):
    return ref_class4(a) if a.version == 4 else ref_class6(a)


def python_global(a):
    """ipaddress's own verdict, after unwrapping what the packets' real destination is."""
    if a.version == 6:
        inner = embedded4(a)
        if inner is not None:
            return all(v.is_global for v in inner)
        return a.is_global
    return a.is_global


# --- what the proxy should read ----------------------------------------------------------------
def strict_parse(s):
    """inet_pton: one spelling per address (no zone id here: those are compared apart)."""
    try:
        a = ipaddress.ip_address(s)
    except ValueError:
        return None
    if a.version == 6 and a.scope_id is not None:
        return "scoped"
    return a


def aton(s):
    """glibc inet_aton (as getaddrinfo's numeric path, exact: no trailing text)."""
    parts = s.split(".")
    if not 1 <= len(parts) <= 4:
        return None
    vals = []
    for p in parts:
        if p == "":
            return None
        if p[:2].lower() == "0x":
            digits, base = p[2:], 16
            if digits == "":
                return None  # inet_aton_exact refuses a bare "0x"
        elif p.startswith("0"):
            digits, base = p, 8
        else:
            digits, base = p, 10
        try:
            vals.append(int(digits, base))
        except ValueError:
            return None
    limits = {1: [2**32], 2: [256, 2**24], 3: [256, 256, 2**16], 4: [256] * 4}[len(parts)]
    if any(v >= lim for v, lim in zip(vals, limits)):
        return None
    n = 0
    for v, lim in zip(vals, limits):
        n = n * lim + v
    return IP4(n)


def numeric_parse(s):
    if ":" in s:
        base, _, zone = s.partition("%")
        try:
            return IP6(base) if "%" not in s or zone else None
        except ValueError:
            return None
    if not s or any(not (c.isdigit() or c.lower() in "abcdefx.") for c in s):
        return None
    return aton(s)


def name_ok(s):
    ok = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._")
    return 0 < len(s) <= 254 and all(c in ok for c in s) and s != "."


def target_ok(s):
    if ":" in s:
        if "%" in s or "]" in s or "[" in s:
            return False
        try:
            IP6(s)
            return all(c in "0123456789abcdefABCDEF:." for c in s)
        except ValueError:
            return False
    # No empty labels ("a..b", ".x", "x.."); one trailing dot (an absolute name) is fine.
    return name_ok(s) and ".." not in s and not s.startswith(".")


# --- inputs ------------------------------------------------------------------------------------
V4_EDGES = ["0.0.0.0", "0.255.255.255", "1.0.0.0", "9.255.255.255", "10.0.0.0", "10.255.255.255", "11.0.0.0",
            "100.63.255.255", "100.64.0.0", "100.127.255.255", "100.128.0.0", "126.255.255.255", "127.0.0.0",
            "127.255.255.255", "128.0.0.0", "169.253.255.255", "169.254.0.0", "169.254.169.254", "169.254.255.255",
            "169.255.0.0", "172.15.255.255", "172.16.0.0", "172.31.255.255", "172.32.0.0", "192.0.0.0", "192.0.0.8",
            "192.0.0.170", "192.0.0.255", "192.0.1.0", "192.0.2.0", "192.0.2.255", "192.88.99.1", "192.167.255.255",
            "192.168.0.0", "192.168.255.255", "192.169.0.0", "198.17.255.255", "198.18.0.0", "198.19.255.255",
            "198.20.0.0", "198.51.100.1", "203.0.113.1", "223.255.255.255", "224.0.0.0", "239.255.255.255",
            "240.0.0.0", "255.255.255.254", "255.255.255.255", "8.8.8.8", "1.1.1.1"]
V6_PREFIXES = ["::", "::1", "::ffff:0:0", "::ffff:0:0:0", "64:ff9b::", "64:ff9b:1::", "100::", "2001::", "2001:db8::",
               "2001:2::", "2001:10::", "2002::", "2000::", "3fff::", "3ffe::", "4000::", "5f00::", "fc00::", "fd00::",
               "fe80::", "febf:ffff::", "fec0::", "feff::", "ff00::", "ff02::", "2606:4700::", "1fff:ffff::", "e000::"]
SPECIAL4 = [N4(n) for n in ["0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16",
                              "172.16.0.0/12", "192.0.0.0/24", "192.0.2.0/24", "192.88.99.0/24", "192.168.0.0/16",
                              "198.18.0.0/15", "198.51.100.0/24", "203.0.113.0/24", "224.0.0.0/4", "240.0.0.0/4"]]


def rand4(r):
    if r.random() < 0.5:
        net = r.choice(SPECIAL4)
        lo = int(net.network_address)
        # near either end of the block, or inside it
        n = r.choice([lo, lo - 1, lo + net.num_addresses, lo + net.num_addresses - 1,
                      lo + r.randrange(net.num_addresses)]) % 2**32
        return IP4(n)
    return IP4(r.getrandbits(32))


def rand6(r):
    kind = r.random()
    if kind < 0.35:
        # an IPv4 address in one of the embedding forms
        v = rand4(r)
        b = v.packed
        form = r.randrange(6)
        if form == 0:
            raw = bytes(10) + b"\xff\xff" + b
        elif form == 1:
            raw = bytes(12) + b
        elif form == 2:
            raw = bytes(8) + b"\xff\xff\0\0" + b
        elif form == 3:
            raw = b"\x00\x64\xff\x9b" + bytes(8) + b
        elif form == 4:
            raw = b"\x20\x02" + b + r.randbytes(10)
        else:
            w = rand4(r).packed
            raw = b"\x20\x01\0\0" + w + r.randbytes(4) + bytes(x ^ 0xFF for x in b)
        return IP6(raw)
    if kind < 0.8:
        p = IP6(r.choice(V6_PREFIXES))
        bits = r.choice([0, 8, 16, 32, 64, 96, 112, 120, 127])
        return IP6(int(p) | (r.getrandbits(bits) if bits else 0))
    return IP6(r.getrandbits(128))


def spellings6(a, r):
    out = [a.compressed, a.exploded, a.exploded.upper()]
    b = a.packed
    groups = [f"{int.from_bytes(b[i:i + 2], 'big'):x}" for i in range(0, 16, 2)]
    out.append(":".join(groups[:6]) + ":" + str(IP4(b[12:])))  # dotted IPv4 tail
    out.append(":".join(g.zfill(4) for g in groups[:6]) + ":" + str(IP4(b[12:])))
    if r.random() < 0.2:
        out.append(a.compressed + r.choice(["%eth0", "%1", "%lo", "%25", "%"]))
    if r.random() < 0.1:
        out.append(":".join(groups[:7]) + ":" + groups[7].zfill(5))  # a five-digit group: refused
    return out


def spellings4(a, r):
    o = a.packed
    n = int(a)
    out = [str(a), str(n), hex(n), f"0{n:o}", f"{o[0]}.{o[1]}.{(o[2] << 8) | o[3]}", f"{o[0]}.{(n & 0xffffff)}",
           ".".join(f"0x{x:x}" for x in o), ".".join(f"0{x:o}" for x in o), ".".join(f"0x{x:02X}" for x in o)]
    if r.random() < 0.3:
        out += [str(a) + ".", "0" + str(a), str(a) + ".0", f"{o[0]}.{o[1]}.{o[2]}.0{o[3]}9", hex(n + 2**32),
                f"{o[0]}.{o[1]}.{o[2]}.{o[3] + 256}"]
    return out


FIXED = ["", ".", "localhost", "a..b", "-", "_", "1.2.3.4.5", "1..2", "0x", "0x.0x.0x.0x", "00", "08", "09.1",
         "::", ":::", "1::2::3", "[::1]", "::1%", "fe80::1%eth0", "::ffff:1.2.3", "::ffff:01.2.3.4",
         "::ffff:1.2.3.256", "1:2:3:4:5:6:7:8:9", "1:2:3:4:5:6:7::", "::2:3:4:5:6:7:8", "1:2:3:4:5:6:1.2.3.4",
         "1:2:3:4:5:6:7:1.2.3.4", "::0:a:b:c:d:e:f", "2130706433", "4294967295", "4294967296", "0x7f.1",
         "0177.1", "127.1", "127.0.1", "0", "0x0", "017777777777", "0xffffffff", "0x100000000"]


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    tool = sys.argv[1]
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 40000
    r = random.Random(int(sys.argv[3]) if len(sys.argv) > 3 else 16)

    inputs = list(FIXED)
    for e in V4_EDGES:
        inputs += spellings4(IP4(e), r)
    for p in V6_PREFIXES:
        inputs += spellings6(IP6(p), r)
    while len(inputs) < count:
        if r.random() < 0.5:
            inputs += spellings4(rand4(r), r)
        else:
            inputs += spellings6(rand6(r), r)
    inputs = [s for s in dict.fromkeys(inputs) if "\n" not in s]

    out = subprocess.run([tool], input="\n".join(inputs) + "\n", capture_output=True, text=True, check=True).stdout
    lines = out.split("\n")[:-1]
    assert len(lines) == len(inputs), (len(lines), len(inputs))

    problems = []
    checked = dialable = 0
    for s, line in zip(inputs, lines):
        target, strict_a, strict_c, num_a, num_c, refuse = line.split("\t")
        def bad(what):
            problems.append(f"{s!r}: {what} (proxy: {line!r})")

        if (target == "ok") != target_ok(s):
            bad(f"parse_request_target {'accepts' if target == 'ok' else 'refuses'} it, expected the opposite")

        exp = strict_parse(s)
        if "%" in s:
            # Zone ids: boost reads them through if_nametoindex and takes a bare trailing '%' as
            # scope 0 ("::1%" parses; ipaddress refuses it). Not compared: parse_authority
            # refuses '%' before any of this, and parse_cidr refuses a non-zero scope.
            pass
        elif exp is None:
            if strict_a != "-":
                bad("inet_pton accepts a spelling ipaddress refuses")
        elif strict_a == "-":
            bad("inet_pton refuses a spelling ipaddress accepts")
        else:
            got = ipaddress.ip_address(strict_a.split("%")[0])
            if got != exp:
                bad(f"strict parse reads {got}, ipaddress {exp}")
            elif strict_c != ref_class(exp):
                bad(f"class {strict_c}, reference {ref_class(exp)}")
            checked += 1

        if "%" in s:
            continue  # getaddrinfo's scope handling is the kernel's, not compared
        nexp = numeric_parse(s)
        if num_a == "-":
            if nexp is not None:
                bad(f"getaddrinfo refuses it; expected {nexp}")
            continue
        got = ipaddress.ip_address(num_a.split("%")[0])
        if nexp is None:
            bad(f"getaddrinfo reads {got}; expected no address")
            continue
        if got != nexp:
            bad(f"getaddrinfo reads {got}, expected {nexp}")
            continue
        if num_c != ref_class(got):
            bad(f"class {num_c}, reference {ref_class(got)}")
        if refuse == "no":
            dialable += 1
            if not python_global(got):
                bad(f"the proxy would dial {got}, which ipaddress says is not global")
        checked += 1

    for p in problems[:40]:
        print(p)
    if problems:
        print(f"{len(problems)} disagreement(s) in {len(inputs)} inputs")
        return 1
    print(f"{len(inputs)} inputs, {checked} classified, {dialable} dialable: all agree")
    return 0


if __name__ == "__main__":
    sys.exit(main())
