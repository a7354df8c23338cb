import sys

from crossfhe.cli.main import main

sys.exit(main())
