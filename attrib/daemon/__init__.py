"""The daemon (issue 7): an HTTP service that takes regression flags from CI, queues them in
SQLite and bisects them unattended, surviving a kill -9 (docs/daemon.md)."""
