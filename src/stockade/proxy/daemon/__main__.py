"""`python -m stockade.proxy.daemon`: how a run starts this user's daemon (proxy/client/launch.py)."""

import sys

from stockade.proxy.daemon.main import main

sys.exit(main())
