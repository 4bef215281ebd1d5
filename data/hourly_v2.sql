-- Version 2: only pages with at least two views, and when the first one was.
SELECT ts - ts % 3600 AS hour,
       page,
       count(*) AS views,
       count(DISTINCT user) AS visitors,
       min(ts) AS first_view
FROM events
GROUP BY 1, 2
HAVING count(*) >= 2
