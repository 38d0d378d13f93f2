module github.com/lockproof/lockproof

go 1.24
