"""Ed25519 signature verification (RFC 8032, section 5.1.7) in pure Python.

The standard library has no Ed25519, and an auditor checking sandfortd's signed checkpoints
should not need a third-party package. Only verification is here (nothing secret is handled, so
constant time does not matter); it follows the RFC's own reference code (section 6) closely
enough to be read side by side with it. A check costs a few milliseconds.

Rejected as the RFC requires: S >= L (a malleable signature), encodings of R or A whose y is not
below p (non-canonical), y without a matching x, and x = 0 with the sign bit set.
"""

from __future__ import annotations

import base64
import hashlib
import re
from typing import Optional, Tuple, Union

__all__ = ["verify", "public_key_from_pem", "key_id"]

_P = 2 ** 255 - 19
_L = 2 ** 252 + 27742317777372353535851937790883648493  # the order of the base point
_D = -121665 * pow(121666, _P - 2, _P) % _P
_SQRT_M1 = pow(2, (_P - 1) // 4, _P)

# Extended homogeneous coordinates (X, Y, Z, T): x = X/Z, y = Y/Z, x*y = T/Z.
Point = Tuple[int, int, int, int]
_IDENTITY: Point = (0, 1, 1, 0)


def _add(a: Point, b: Point) -> Point:
    """The complete addition law of edwards25519 (also doubles)."""
    pa = (a[1] - a[0]) * (b[1] - b[0]) % _P
    pb = (a[1] + a[0]) * (b[1] + b[0]) % _P
    pc = 2 * a[3] * b[3] * _D % _P
    pd = 2 * a[2] * b[2] % _P
    e, f, g, h = pb - pa, pd - pc, pd + pc, pb + pa
    return (e * f % _P, g * h % _P, f * g % _P, e * h % _P)


def _mul(s: int, p: Point) -> Point:
    q = _IDENTITY
    while s > 0:
        if s & 1:
            q = _add(q, p)
        p = _add(p, p)
        s >>= 1
    return q


def _equal(a: Point, b: Point) -> bool:
    # x1/z1 == x2/z2 and y1/z1 == y2/z2 without dividing.
    return (a[0] * b[2] - b[0] * a[2]) % _P == 0 and (a[1] * b[2] - b[1] * a[2]) % _P == 0


def _recover_x(y: int, sign: int) -> Optional[int]:
    """x from y and x's low bit (section 5.1.3 steps 2-4), None when there is none."""
    if y >= _P:
        return None
    x2 = (y * y - 1) * pow(_D * y * y + 1, _P - 2, _P) % _P
    if x2 == 0:
        return None if sign else 0
    x = pow(x2, (_P + 3) // 8, _P)
    if (x * x - x2) % _P != 0:
        x = x * _SQRT_M1 % _P
    if (x * x - x2) % _P != 0:
        return None
    if x & 1 != sign:
        x = _P - x
    return x


def _decode_point(s: bytes) -> Optional[Point]:
    if len(s) != 32:
        return None
    y = int.from_bytes(s, "little")
    sign = y >> 255
    y &= (1 << 255) - 1
    x = _recover_x(y, sign)
    if x is None:
        return None
    return (x, y, 1, x * y % _P)


def _base_point() -> Point:
    y = 4 * pow(5, _P - 2, _P) % _P
    x = _recover_x(y, 0)
    assert x is not None
    return (x, y, 1, x * y % _P)


_B = _base_point()


def verify(public_key: bytes, message: bytes, signature: bytes) -> bool:
    """True when ``signature`` (64 bytes) is a valid Ed25519 signature of ``message`` by the
    32-byte ``public_key``."""
    if len(public_key) != 32 or len(signature) != 64:
        return False
    a = _decode_point(public_key)
    r = _decode_point(signature[:32])
    if a is None or r is None:
        return False
    s = int.from_bytes(signature[32:], "little")
    if s >= _L:
        return False
    k = int.from_bytes(hashlib.sha512(signature[:32] + public_key + message).digest(), "little") % _L
    # The cofactored equation of step 3: [8][S]B = [8]R + [8][k]A.
    return _equal(_mul(8 * s, _B), _add(_mul(8, r), _mul(8 * k, a)))


# SubjectPublicKeyInfo of an Ed25519 key: SEQUENCE { SEQUENCE { OID 1.3.101.112 } BIT STRING (32 bytes) }.
_SPKI_PREFIX = bytes.fromhex("302a300506032b6570032100")
_PEM = re.compile(r"-----BEGIN PUBLIC KEY-----\s*([A-Za-z0-9+/=\s]+?)\s*-----END PUBLIC KEY-----")


def public_key_from_pem(pem: Union[str, bytes]) -> bytes:
    """The 32 raw bytes of an Ed25519 public key in PEM (``-----BEGIN PUBLIC KEY-----``, as
    ``GET /v1/audit/public-key`` and ``openssl pkey -pubout`` write it); ValueError otherwise."""
    text = pem.decode("ascii", "replace") if isinstance(pem, (bytes, bytearray)) else pem
    m = _PEM.search(text)
    if not m:
        raise ValueError("not a PEM public key (no BEGIN/END PUBLIC KEY block)")
    try:
        der = base64.b64decode("".join(m.group(1).split()), validate=True)
    except ValueError as e:
        raise ValueError(f"the PEM public key is not valid base64: {e}") from None
    if len(der) != len(_SPKI_PREFIX) + 32 or not der.startswith(_SPKI_PREFIX):
        raise ValueError("not an Ed25519 public key in PEM")
    raw = der[len(_SPKI_PREFIX):]
    if _decode_point(raw) is None:
        raise ValueError("the Ed25519 public key is not a valid point")
    return raw


def key_id(public_key: bytes) -> str:
    """sandfortd's key id: the first 16 hex characters of SHA-256 of the raw public key."""
    return hashlib.sha256(public_key).hexdigest()[:16]
