-- Sessions ended by signing out: a session cookie is refused once its id is here, even though its
-- signature and expiry still hold. A row is useless after the cookie's own expiry and is purged then.
CREATE TABLE revoked_sessions (
    session_id  text PRIMARY KEY CHECK (length(session_id) BETWEEN 16 AND 64),
    expires_at  timestamptz NOT NULL,
    revoked_at  timestamptz NOT NULL DEFAULT now()
);
