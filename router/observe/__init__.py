"""What every request leaves behind: the decision record and log, metrics, structured logs."""
