module volley/tests/server/h2c

go 1.24
