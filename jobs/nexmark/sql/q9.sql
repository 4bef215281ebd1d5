-- Nexmark q9 (winning bids): each auction with its highest bid within its
-- lifetime, ties to the earliest, then to the smallest bidder and extra.
SELECT id, item_name, description, initial_bid, reserve, date_time, expires, seller,
       category, extra, auction, bidder, price, bid_date_time, bid_extra
FROM (SELECT a.*, b.auction, b.bidder, b.price, b.date_time AS bid_date_time,
             b.extra AS bid_extra,
             ROW_NUMBER() OVER (PARTITION BY a.id
                                ORDER BY b.price DESC, b.date_time, b.bidder, b.extra) AS rownum
      FROM auction a, bid b
      WHERE a.id = b.auction AND b.date_time BETWEEN a.date_time AND a.expires) AS r
WHERE rownum <= 1
