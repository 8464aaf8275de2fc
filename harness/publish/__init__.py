"""`harness publish`: a static site of every run in a results folder (plain HTML, one vendored
chart library, no server).

collect.py reads the runs and (through bisects.py) the version bisects, hostile folders skipped,
each with a line; flags.py names what must not pass as a normal number, history.py turns runs into
points and charts (headings.py names them), the *_page.py modules write the pages through page.py
(the one place text becomes HTML), site.py writes the folder, workers.py shares the run pages and
comparisons out over processes, progress.py says how far a long publish got on stderr.
"""

from harness.publish.site import DEFAULT_MAX_PAIRS, Published, publish_site

__all__ = ["DEFAULT_MAX_PAIRS", "Published", "publish_site"]
