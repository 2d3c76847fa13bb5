package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// Product is one article of the catalogue, with its stock as read.
type Product struct {
	ID         int64
	Name       string
	PriceCents int64
	// Stock is the number of units left.
	Stock int64
	// Flash marks the flash deals: discounted, and only FlashStock units.
	Flash bool
}

// The seeded catalogue.
const (
	// CatalogueSize is the number of products Open seeds, ids 1 to
	// CatalogueSize.
	CatalogueSize = 50
	// FlashDeals is the number of flash deals, ids 1 to FlashDeals.
	FlashDeals = 5
	// FlashStock is a flash deal's initial stock.
	FlashStock = 100
	// RegularStock is the initial stock of the other products: enough
	// that they never run out in a demo.
	RegularStock = 1_000_000
)

var (
	lines = []string{"Aurora", "Nimbus", "Comet", "Zephyr", "Quasar"}
	kinds = []struct {
		name  string
		cents int64
	}{
		{"Phone", 49900}, {"Earbuds", 7900}, {"Smartwatch", 19900}, {"Tablet", 32900}, {"Laptop", 99900},
		{"Camera", 45900}, {"Speaker", 5900}, {"Keyboard", 8900}, {"Mouse", 2900}, {"Monitor", 17900},
	}
)

// Catalogue is the catalogue Open seeds into an empty database: the same
// CatalogueSize products every time. Product i (from 1) is line
// (i−1)/10 of kind (i−1)%10, e.g. 1 "Aurora Phone", 12 "Nimbus Earbuds";
// each line costs 10 % more than the one before, prices end in 99 cents.
// Products 1 to FlashDeals are the flash deals: half price, FlashStock
// units; the rest have RegularStock.
func Catalogue() []Product {
	out := make([]Product, 0, CatalogueSize)
	for i := range CatalogueSize {
		k := kinds[i%len(kinds)]
		line := i / len(kinds)
		cents := k.cents * int64(10+line) / 10 // +10 % a line
		p := Product{ID: int64(i + 1), Name: lines[line] + " " + k.name, Stock: RegularStock}
		if p.ID <= FlashDeals {
			p.Name = "Flash deal: " + p.Name
			p.Flash, p.Stock = true, FlashStock
			cents /= 2
		}
		p.PriceCents = cents/100*100 - 1 // …,99
		out = append(out, p)
	}
	return out
}

// Product reads one product; ErrNotFound if there is none with id.
func (s *Store) Product(ctx context.Context, id int64) (Product, error) {
	var p Product
	err := s.db.QueryRowContext(ctx, s.q.product, id).Scan(&p.ID, &p.Name, &p.PriceCents, &p.Stock, &p.Flash)
	if errors.Is(err, sql.ErrNoRows) {
		return Product{}, fmt.Errorf("store: product %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return Product{}, fmt.Errorf("store: product %d: %w", id, err)
	}
	return p, nil
}

// Products reads the whole catalogue, by id.
func (s *Store) Products(ctx context.Context) ([]Product, error) {
	rows, err := s.db.QueryContext(ctx, s.q.products)
	if err != nil {
		return nil, fmt.Errorf("store: products: %w", err)
	}
	defer rows.Close()
	var out []Product
	for rows.Next() {
		var p Product
		if err := rows.Scan(&p.ID, &p.Name, &p.PriceCents, &p.Stock, &p.Flash); err != nil {
			return nil, fmt.Errorf("store: products: %w", err)
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: products: %w", err)
	}
	return out, nil
}
