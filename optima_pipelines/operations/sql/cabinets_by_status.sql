SELECT status, count(*) FROM cabinets GROUP BY status
