"""Everything that turns validated results into text or pictures, for every medium.

harness/text/numbers.py owns every number -> text rule and harness/text/escape.py every text ->
medium rule; table.py
(the run table), comparison.py (`compare`), exports.py (markdown, CSV, JSON, HTML), records.py
(one record per framework and metric), environment.py, figures.py and folder.py (`harness
report`) build on those two and nothing else formats a number or escapes a string.
"""
