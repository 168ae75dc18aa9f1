"""The one error type the pure core raises.

Every problem a user can act on becomes exactly one Fatal result at the gRPC edge, so the
error carries *where* it is (a claim field path, a ConfigData rule, a file, a component
resource) apart from *what* is wrong. The edge formats both; nothing else is needed to
turn an exception into a message a service team can act on.

Messages must never contain secret values, credentials or registry response bodies:
raise with the location and the rule broken, never with the offending payload when it
may be sensitive.
"""

from __future__ import annotations


class SackError(Exception):
    """A problem in the input (claim, policy, ConfigData, component) that composition cannot get
    past.

    ``where`` names the place at fault: ``spec.namespaces[1].name``,
    ``ConfigData localization[0] (file deployment.yaml)``, ``component acme.org/x:1.0 resource
    chart``.
    ``reason`` is a PascalCase machine-readable reason for the Result (``InvalidClaim``,
    ``PolicyViolation``, ``InvalidConfigData``, ``UnsupportedRule``, ``ComponentError``, ...).
    """

    reason = "ComposeFailed"

    def __init__(self, where: str, message: str, *, reason: str | None = None) -> None:
        super().__init__(f"{where}: {message}" if where else message)
        self.where = where
        self.message = message
        if reason:
            self.reason = reason


# Deliberately alike (duplicates): one small class per reason, so callers catch by kind.
class InvalidClaim(SackError):
    """The claim (XR spec) breaks the API: a field is missing, unknown or out of its bounds."""

    reason = "InvalidClaim"


class InvalidPolicy(SackError):
    """The function input (the ops team's Policy) is not a valid Policy."""

    reason = "InvalidFunctionInput"


class PolicyViolation(SackError):
    """The claim asks for something the ops policy does not allow."""

    reason = "PolicyViolation"


class InvalidConfigData(SackError):
    """The component's ConfigData cannot be read or applied as written."""

    reason = "InvalidConfigData"


class UnsupportedRule(InvalidConfigData):
    """A ConfigData construct outside the documented supported subset (never silently skipped)."""

    reason = "UnsupportedConfigData"


class InvalidValues(SackError):
    """Configuration values that do not satisfy the ConfigData schema."""

    reason = "InvalidValues"


class ComponentError(SackError):
    """The component version cannot be read or does not fit the packaging contract."""

    reason = "ComponentError"


class DigestMismatch(ComponentError):
    """Bytes read from a component that do not hash to the digest naming them: a resource's
    declared digest, or the digest a blob is stored or referenced under (tampered content).
    """

    reason = "DigestMismatch"


class SourceUnavailable(ComponentError):
    """A transient failure reaching a component source (unreachable, 5xx, timeout)."""

    reason = "ComponentSourceUnavailable"
