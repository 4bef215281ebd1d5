-- Nexmark q7 (highest bid): per tumbling window of 10 s, the bids with the
-- highest price (BETWEEN includes the window's end, as in Flink's text).
WITH b AS (SELECT auction, price, bidder, date_time, extra, epoch_ms(date_time) AS t FROM bid),
m AS (
  SELECT max(price) AS maxprice, window_end
  FROM TABLE(TUMBLE(TABLE b, DESCRIPTOR(t), INTERVAL '10' SECOND))
  GROUP BY window_start, window_end)
SELECT b.auction, b.price, b.bidder, b.date_time, b.extra
FROM b JOIN m ON b.price = m.maxprice
WHERE b.t BETWEEN m.window_end - INTERVAL '10' SECOND AND m.window_end
