-- Page views per hour (a tumbling window by arithmetic on the event time).
SELECT ts - ts % 3600 AS hour,
       page,
       count(*) AS views,
       count(DISTINCT user) AS visitors
FROM events
GROUP BY 1, 2
