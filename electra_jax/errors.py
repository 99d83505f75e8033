"""The exception types that user-facing problems raise, and the exit statuses they map to.

Anything a user can fix (a missing file, a bad config value, a corrupt checkpoint) is raised as
`ElectraError` with a message that names the problem and the fix. The command-line entry points
(`electra_jax.cli.run`) turn it into one line on stderr and exit status 1 (`EXIT_ERROR`);
programming errors keep their tracebacks.

A run stopped by SIGTERM or SIGINT after saving its state raises `Interrupted`, which exits with
`EXIT_INTERRUPTED` (75, EX_TEMPFAIL: "try again"), so that schedulers requeue the job and the
same command resumes it.
"""

EXIT_ERROR = 1
EXIT_INTERRUPTED = 75


class ElectraError(Exception):
  """A problem with the user's input, config or files, with a message saying how to fix it."""


class Interrupted(ElectraError):
  """A job stopped by a signal after saving what it had; rerunning the command resumes it."""


class NonFiniteLoss(ElectraError):
  """Training produced a non-finite loss (train.nonfinite_policy=stop)."""
