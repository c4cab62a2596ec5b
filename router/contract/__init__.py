"""The stage contract on one screen: the request context, the stage protocol and its one failure boundary, the timeout, the chain."""
