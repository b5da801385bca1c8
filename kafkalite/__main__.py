import sys

from kafkalite.cli import main

sys.exit(main())
