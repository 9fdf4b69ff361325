"""graphcheck's errors: what went wrong, in domain terms. Only the command line maps them to exit codes."""


class GraphcheckError(Exception):
    """Base of the errors graphcheck raises on purpose; each message is one line meant for a user."""


class InputError(GraphcheckError):
    """A bad option value or input (a suite name, a database location, a report folder)."""


class BackendUnavailableError(GraphcheckError):
    """The backend's framework or device is missing."""
