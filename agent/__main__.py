"""`python -m agent` runs `multiq-agent`."""

import sys

from agent.main import main

sys.exit(main())
