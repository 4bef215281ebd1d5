-- Version 2: only pages with at least two views, and when the first one was.
WITH e AS (SELECT user, page, to_timestamp(ts) AS t FROM events)
SELECT window_start, page, count(*) AS views, count(DISTINCT user) AS visitors,
       min(t) AS first_view
FROM TABLE(TUMBLE(TABLE e, DESCRIPTOR(t), INTERVAL '1' HOUR))
GROUP BY window_start, page
HAVING count(*) >= 2
