-- Each page view with the country its user had at the time of the view:
-- the temporal join of the README's `enrich -p as_of=ts:valid_from`, in SQL.
-- A version of user_history holds from its valid_from on; the WATERMARK
-- names that column (versions may arrive up to a day out of order).
CREATE TABLE user_history (
  valid_from BIGINT,
  WATERMARK FOR valid_from AS valid_from - 86400
);

SELECT v.ts, v.user_id, v.url, h.valid_from, h.country
FROM views AS v
JOIN user_history FOR SYSTEM_TIME AS OF v.ts AS h
  ON v.user_id = h.user_id
