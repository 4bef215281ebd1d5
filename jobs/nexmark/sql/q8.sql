-- Nexmark q8 (monitor new users): people who opened an auction in the 10 s
-- tumbling window they registered in.
WITH p AS (SELECT id, name, epoch_ms(date_time) AS t FROM person),
a AS (SELECT seller, epoch_ms(date_time) AS t FROM auction),
pw AS (
  SELECT id, name, window_start, window_end
  FROM TABLE(TUMBLE(TABLE p, DESCRIPTOR(t), INTERVAL '10' SECOND))
  GROUP BY id, name, window_start, window_end),
aw AS (
  SELECT seller, window_start, window_end
  FROM TABLE(TUMBLE(TABLE a, DESCRIPTOR(t), INTERVAL '10' SECOND))
  GROUP BY seller, window_start, window_end)
SELECT pw.id, pw.name, extract(epoch FROM pw.window_start) * 1000 AS window_start
FROM pw JOIN aw
  ON pw.id = aw.seller AND pw.window_start = aw.window_start AND pw.window_end = aw.window_end
