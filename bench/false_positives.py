"""False positives of the leak catalogue (architecture §4 "Shapes are specific") on ordinary prose
and code that is on every machine: the Python standard library's sources and the README/METADATA
files of the installed distributions (site-packages).

Every match is classified as a *documentation placeholder* (the text says it is not a real
secret: ``EXAMPLE``, ``your-token``, ``xxxx``, ``<password>``, ``user:password@``, a run of one
character, a counting sequence), a *named credential* (a token-like value of a URL query
parameter whose name says it is a credential: ``token=``, ``access_token=``, ``api_key=``,
``apikey=``, ``secret=``, ``password=``; not the generic ``key=``: a real credential, masked by
design, though the URL may have been published with it, as a Codecov badge's graph token is) or
a *real false positive* (anything else: prose or code that the catalogue mistook for a secret).
Prints the count per shape and each named credential and real false positive with its file and
line. Target: no real false positive.

Usage: ``python bench/false_positives.py [--show N]``; exit status 1 when a real false positive
is found.
"""

from __future__ import annotations

import argparse
import base64
import re
import site
import sys
import sysconfig
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.args import decimal
from orchestrator.policy import Redactor
from orchestrator.policy.hits import Hit

PLACEHOLDER = re.compile(
    r"example|sample|dummy|fake|placeholder|your|redacted|secret|token|password|passwd|"
    r"changeme|xxxx|\*\*\*|\.\.\.|<|>|\{|\}|\$|abcdef|123456|012345|test|demo|foo|bar|"
    r"user(?:name)?:|pass|admin:admin|key-here|my-?key|insert|replace|value",
    re.IGNORECASE,
)


URL_EXAMPLE = re.compile(r"@?(?:[a-z0-9.-]*\.)?(?:example\.(?:com|org|net)|localhost)\b")
"""A credential in a URL to a documentation host (RFC 2606 example domains, localhost)."""


EXAMPLE_CLAIMS = re.compile(r'"some"\s*:\s*"payload"|john doe|1234567890', re.IGNORECASE)
"""The claims of the JSON Web Tokens documentation shows (jwt.io's and PyJWT's examples)."""


def _jwt_claims(secret: str) -> str:
    """The decoded middle segment of a JSON Web Token (``""`` when it is not one)."""
    parts = secret.split(".")
    if len(parts) != 3 or not parts[0].startswith("eyJ"):
        return ""
    try:
        return base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)).decode()
    except (ValueError, UnicodeDecodeError):
        return ""


def is_placeholder(secret: str, after: str = "") -> bool:
    """Whether a matched secret reads as a documentation placeholder; ``after``: the text that
    follows the match (a URL's host). A token whose claims are a documentation example counts
    as one: it is a real token shape, so it is masked, but no secret."""
    if PLACEHOLDER.search(secret) or URL_EXAMPLE.match(after):
        return True
    if EXAMPLE_CLAIMS.search(_jwt_claims(secret)):
        return True
    body = re.sub(r"[^A-Za-z0-9]", "", secret)
    if not body:
        return True
    if len(set(body.lower())) <= max(3, len(body) // 8):  # "AAAA…", "abababab"
        return True
    return bool(re.search(r"(.)\1{5,}", body))


NAMED_CREDENTIAL = re.compile(
    r"[?&;](?:access_token|api_?key|token|secret|password)=\Z", re.IGNORECASE
)
"""A query parameter whose name says its value is a credential, just before the value."""


def classify(text: str, hit: Hit) -> str:
    """``"placeholder"``, ``"named"`` (a named credential) or ``"real"`` (a real false
    positive): what the match ``hit`` of the catalogue in ``text`` is (module docstring)."""
    secret = text[hit.secret_start : hit.secret_end]
    if is_placeholder(secret, text[hit.end : hit.end + 64]):
        return "placeholder"
    before = text[max(0, hit.secret_start - 16) : hit.secret_start]
    if hit.name == "url_credential" and NAMED_CREDENTIAL.search(before):
        return "named"
    return "real"


def corpus() -> Iterator[Path]:
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    yield from sorted(p for p in stdlib.rglob("*.py") if "site-packages" not in p.parts)
    roots = {Path(p) for p in [*site.getsitepackages(), site.getusersitepackages()]}
    roots |= {Path(p) for p in sys.path if p.endswith("site-packages")}
    for root in sorted(r for r in roots if r.is_dir()):
        for path in sorted(root.rglob("*")):
            name = path.name.upper()
            if path.is_file() and (name == "METADATA" or name.startswith("README")):
                yield path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--show", type=decimal, default=20, help="real false positives to list")
    args = parser.parse_args()
    redactor = Redactor()
    placeholders: Counter[str] = Counter()
    named: Counter[str] = Counter()
    real: Counter[str] = Counter()
    listed: list[str] = []
    listed_named: list[str] = []
    files = size = 0
    start = time.perf_counter()
    for path in corpus():
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        files += 1
        size += len(text.encode("utf-8", errors="replace"))
        for hit in redactor.hits(text):
            kind = classify(text, hit)
            if kind == "placeholder":
                placeholders[hit.name] += 1
                continue
            line = text.count("\n", 0, hit.start) + 1
            secret = text[hit.secret_start : hit.secret_end]
            where = f"  {path}:{line}: {hit.name}: {secret[:80]!r}"
            if kind == "named":
                named[hit.name] += 1
                listed_named.append(where)
                continue
            real[hit.name] += 1
            if len(listed) < args.show:
                listed.append(where)
    seconds = time.perf_counter() - start
    print(f"corpus: {files} files, {size / 1e6:.1f} MB ({seconds:.1f} s)")
    print(f"{'shape':<20} {'placeholders':>12} {'named':>6} {'real':>6}")
    for name in sorted(set(placeholders) | set(named) | set(real)):
        print(f"{name:<20} {placeholders[name]:>12} {named[name]:>6} {real[name]:>6}")
    total = f"{sum(placeholders.values()):>12} {sum(named.values()):>6} {sum(real.values()):>6}"
    print(f"{'total':<20} {total}")
    if listed_named:
        print("named credentials (masked by design):")
        print("\n".join(listed_named[: args.show]))
    if listed:
        print("real false positives:")
        print("\n".join(listed))
    return 1 if real else 0


if __name__ == "__main__":
    raise SystemExit(main())
