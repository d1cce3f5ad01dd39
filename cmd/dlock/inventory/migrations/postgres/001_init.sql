-- 001_init.sql (PostgreSQL): the flash-sale schema.
CREATE TABLE stock (
    sku     TEXT PRIMARY KEY,
    qty     BIGINT NOT NULL CHECK (qty >= 0),
    version BIGINT NOT NULL DEFAULT 0,
    fence   BIGINT NOT NULL DEFAULT 0,
    initial BIGINT NOT NULL
);

CREATE TABLE orders (
    id         BIGSERIAL PRIMARY KEY,
    sku        TEXT NOT NULL,
    qty        BIGINT NOT NULL CHECK (qty > 0),
    buyer      TEXT NOT NULL,
    request_id TEXT NOT NULL UNIQUE,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX orders_sku ON orders (sku);

-- 000 §3.4: claim a business key first, then work; 0 processing, 1 done, 2 failed.
CREATE TABLE idem (
    biz_key    TEXT PRIMARY KEY,
    status     SMALLINT NOT NULL DEFAULT 0 CHECK (status IN (0, 1, 2)),
    created_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
