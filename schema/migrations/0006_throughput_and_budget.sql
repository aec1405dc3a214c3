-- Workers cache agent configuration: a change to the agents table tells them to read it again.
CREATE FUNCTION quire_agents_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('quire_agents', '');
    RETURN NULL;
END $$;

CREATE TRIGGER agents_changed AFTER INSERT OR UPDATE OR DELETE ON agents
    FOR EACH STATEMENT EXECUTE FUNCTION quire_agents_changed();
