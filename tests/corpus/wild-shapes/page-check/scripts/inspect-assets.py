"""List the assets an HTML page loads."""

import re
import sys

for src in re.findall(r'src="([^"]+)"', open(sys.argv[1]).read()):
    print(src)
