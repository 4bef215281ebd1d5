-- Page views per hour: a tumbling window over the event time (ts is in
-- seconds since 1970, which to_timestamp makes a timestamp).
WITH e AS (SELECT user, page, to_timestamp(ts) AS t FROM events)
SELECT window_start, page, count(*) AS views, count(DISTINCT user) AS visitors
FROM TABLE(TUMBLE(TABLE e, DESCRIPTOR(t), INTERVAL '1' HOUR))
GROUP BY window_start, page
