"""The two failures a check raises about the submission itself (not about a wrong value).

Their own module, below both :mod:`course_lib.checks.core` (which raises them) and
:mod:`course_lib.checks.transcript` (which replays a recorded one), so neither imports the other for them.
Does NOT cover: the messages (the checks write them).
"""


class IntegrityError(AssertionError):
    """The submission called something the exercise asks it to implement itself."""


class NotImplementedYet(AssertionError):
    """The stub still raises NotImplementedError."""
