"""``python -m pytest_torchperf.cli``: the ``torchperf`` command."""

import sys

from pytest_torchperf.cli import main

sys.exit(main())
