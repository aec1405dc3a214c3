-- name: stats_status_counts
-- Tasks per agent and status, for `quire status` and the metrics endpoint.
SELECT agent, status::text AS status, count(*) AS n FROM tasks GROUP BY agent, status ORDER BY agent, status;
