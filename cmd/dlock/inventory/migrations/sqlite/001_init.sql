-- 001_init.sql (SQLite): the flash-sale schema.
CREATE TABLE stock (
    sku     TEXT PRIMARY KEY,
    qty     INTEGER NOT NULL CHECK (qty >= 0),
    version INTEGER NOT NULL DEFAULT 0,
    fence   INTEGER NOT NULL DEFAULT 0,
    initial INTEGER NOT NULL
);

CREATE TABLE orders (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    sku        TEXT NOT NULL,
    qty        INTEGER NOT NULL CHECK (qty > 0),
    buyer      TEXT NOT NULL,
    request_id TEXT NOT NULL UNIQUE,
    created_at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP
);
CREATE INDEX orders_sku ON orders (sku);

-- 000 §3.4: claim a business key first, then work; 0 processing, 1 done, 2 failed.
CREATE TABLE idem (
    biz_key    TEXT PRIMARY KEY,
    status     INTEGER NOT NULL DEFAULT 0 CHECK (status IN (0, 1, 2)),
    created_at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP
);
