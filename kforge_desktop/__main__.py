import sys

from kforge_desktop.cli.main import main

sys.exit(main())
