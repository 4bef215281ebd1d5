-- Nexmark q0 (pass-through): the rows of the nexmark-q0 job.
SELECT auction, bidder, price, date_time, extra FROM bid
