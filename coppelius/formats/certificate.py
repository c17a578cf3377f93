"""The admission certificate: what `coppelius admit` writes for an admitted plan, and the one check
that a certificate admits exactly the artifacts beside it.

{"format": "coppelius-certificate", "version": 1, "target", "card", "plan_sha256",
 "realization": {name: sha256}, "tables": {name: sha256}, "step_horizon", "checks": [{"check",
 "passed", "detail"}], "admitted"}

Both sides use `verify`: the elf stage refuses to embed a certificate that does not admit exactly
the plan, realization and tables it embeds, for the target and card the host ELF is for, and the run
refuses a host ELF whose embedded certificate does not, before any device is opened.
"""
import hashlib
import json

from ..errors import CoppeliusError

FORMAT, VERSION = "coppelius-certificate", 1
SECTIONS = ("plan", "certificate")  # every other embedded section is a realization or tables artifact


def verify(where: str, certificate: bytes, artifacts: dict[str, bytes], todo: str, identity: dict) -> dict:
    """The certificate, if it admits exactly `artifacts` (name -> bytes: the plan and every realization
    and tables artifact) for the target and card of `identity` (the host ELF's); otherwise a one-line
    refusal naming `where`, the field and the value."""
    try:
        doc = json.loads(certificate)
    except ValueError:
        raise CoppeliusError(f"{where}: the certificate is not JSON; {todo}")
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or doc.get("version") != VERSION:
        value = doc.get("format") if isinstance(doc, dict) else type(doc).__name__
        raise CoppeliusError(f"{where}: certificate format is {value!r}, not {FORMAT!r} version {VERSION}; {todo}")
    checks = doc.get("checks")
    if doc.get("admitted") is not True or not isinstance(checks, list) or not checks \
            or not all(isinstance(c, dict) and c.get("passed") is True for c in checks):
        raise CoppeliusError(f"{where}: certificate field 'admitted' is {doc.get('admitted')!r} and not every check "
                             f"passed; only an admitted plan gets a host ELF: {todo}")
    horizon = doc.get("step_horizon")
    if not isinstance(horizon, int) or isinstance(horizon, bool) or horizon < 0:
        raise CoppeliusError(f"{where}: certificate field 'step_horizon' is {horizon!r}, not a step count; {todo}")
    certified = {"plan": doc.get("plan_sha256")}
    for group in ("realization", "tables"):
        if not isinstance(doc.get(group), dict):
            raise CoppeliusError(f"{where}: certificate field {group!r} is {doc.get(group)!r}, not digests; {todo}")
        certified |= doc[group]
    if set(certified) != set(artifacts):
        other = sorted(set(certified) ^ set(artifacts))[0]
        raise CoppeliusError(f"{where}: the certificate and the artifacts differ in {other!r}: the certificate "
                             f"names {sorted(certified)}, the artifacts are {sorted(artifacts)}; {todo}")
    for name in sorted(artifacts):
        actual = hashlib.sha256(artifacts[name]).hexdigest()
        if certified[name] != actual:
            raise CoppeliusError(f"{where}: the certificate admits {name} with sha256 {str(certified[name])[:16]}..., "
                                 f"but {name} has sha256 {actual[:16]}...; {todo}")
    for field in ("target", "card"):  # admitted against that card's profile: another target's ELF must not take it
        if doc.get(field) != identity.get(field):
            raise CoppeliusError(f"{where}: the certificate admits these artifacts for {field} {doc.get(field)!r}, not "
                                 f"{identity.get(field)!r}, the {field} this host ELF is for; {todo}")
    return doc
