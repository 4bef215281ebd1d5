-- Nexmark q5 (hot items): per hopping window of 10 s every 2 s, the auctions
-- with the most bids, with the window's bounds in epoch milliseconds as the
-- nexmark-q5 job gives them.
WITH b AS (SELECT auction, epoch_ms(date_time) AS t FROM bid),
counts AS (
  SELECT auction, count(*) AS num, window_start, window_end
  FROM TABLE(HOP(TABLE b, DESCRIPTOR(t), INTERVAL '2' SECOND, INTERVAL '10' SECOND))
  GROUP BY auction, window_start, window_end),
maxes AS (
  SELECT max(num) AS maxn, window_start, window_end FROM counts GROUP BY window_start, window_end)
SELECT c.auction, c.num,
       extract(epoch FROM c.window_start) * 1000 AS window_start,
       extract(epoch FROM c.window_end) * 1000 AS window_end
FROM counts c JOIN maxes m
  ON c.window_start = m.window_start AND c.window_end = m.window_end AND c.num >= m.maxn
