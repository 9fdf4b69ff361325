"""Errors the command line turns into exit codes, shared by cli and commands."""

BACKENDS = ("cpu", "cuda", "npu", "xpu")


class UsageError(Exception):
    """A bad command line or option value; exits with code 2."""


class BackendUnavailableError(Exception):
    """The backend's framework or device is missing; exits with code 3."""
