-- name: session_revoke
-- Signing out: the session's id is refused from now on, until the cookie would have expired anyway.
INSERT INTO revoked_sessions (session_id, expires_at)
VALUES (%(session_id)s, %(expires_at)s)
ON CONFLICT (session_id) DO NOTHING;

-- name: session_revoked_list
-- The ids of revoked sessions whose cookies have not expired yet, for each app process to refuse.
SELECT session_id FROM revoked_sessions WHERE expires_at > coalesce(%(now)s, now());

-- name: session_revoked_purge
-- Forgets revocations of cookies that have expired on their own.
DELETE FROM revoked_sessions WHERE expires_at <= coalesce(%(now)s, now());
