"""The one exception type that user-facing problems raise.

Anything a user can fix (a missing file, a bad config value, a corrupt checkpoint) is raised as
`ElectraError` with a message that names the problem and the fix. `electra_jax.main` turns it
into one line on stderr and exit status 1; programming errors keep their tracebacks.
"""


class ElectraError(Exception):
  """A problem with the user's input, config or files, with a message saying how to fix it."""
