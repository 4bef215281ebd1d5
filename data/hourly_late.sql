-- data/hourly.sql under a watermark: a row more than 10 minutes (600 s)
-- behind the latest ts read before it is dropped. data/events.csv is
-- sorted by user, not by time, so many are.
CREATE TABLE events (user TEXT, page TEXT, ts BIGINT, WATERMARK FOR ts AS ts - 600);
WITH e AS (SELECT user, page, to_timestamp(ts) AS t FROM events)
SELECT window_start, page, count(*) AS views, count(DISTINCT user) AS visitors
FROM TABLE(TUMBLE(TABLE e, DESCRIPTOR(t), INTERVAL '1' HOUR))
GROUP BY window_start, page
