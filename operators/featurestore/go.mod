module github.com/ml-platform/ml-platform/operators/featurestore

go 1.25.0

replace (
	github.com/ml-platform/ml-platform/apis => ../../apis
	github.com/ml-platform/ml-platform/shared => ../../shared
)

require (
	github.com/google/go-cmp v0.7.0
	github.com/jackc/pgx/v5 v5.9.0
	github.com/redis/go-redis/v9 v9.17.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/dgryski/go-rendezvous v0.0.0-20200823014737-9f7001d12a5f // indirect
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	golang.org/x/text v0.29.0 // indirect
)
