"""`kagura farm`: many renders (and long renders cut by time) as Ray tasks.

    farm/jobs.py      the jobs file: `[[job]]` tables checked with `kagura render`'s own checks
    farm/segments.py  a long video cut by time: segment renders and the lossless join
    farm/tasks.py     what runs on a Ray worker (a whole job, or one segment)
    farm/schedule.py  Ray: start or join a cluster, submit, retry once, collect
    farm/progress.py  the progress board (a Ray actor) and the terminal view
    farm/report.py    the summary table and the JSON report

Only `kagura farm` (app/cmd_farm.py) imports this package; Ray is imported by schedule.py.
"""
