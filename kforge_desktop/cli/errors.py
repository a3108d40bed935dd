"""Errors the CLI prints as one sentence."""


class UserError(Exception):
    """Something the user can fix (a bad path, a missing model); printed without a traceback."""

    def __init__(self, message: str, exit_code: int = 2) -> None:
        super().__init__(message)
        self.exit_code = exit_code
