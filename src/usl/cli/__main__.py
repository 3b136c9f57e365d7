"""``python -m usl.cli``: the same as the ``usl`` command."""

from usl.cli import main

main()
