module github.com/sturdy-go/sturdy

go 1.25.0

require go.mongodb.org/mongo-driver/v2 v2.10.0
