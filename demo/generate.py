"""Writing the demo shop: a category hub, paginated product lists, product pages, a sitemap and robots.txt.

Stdlib only and deterministic (same arguments, same bytes), so tests and `make run` crawl the same shop. Links
between pages are relative, so the site works on any address; only sitemap.xml and robots.txt carry `base_url`.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
from dataclasses import dataclass, field
from html import escape
from pathlib import Path

SITE_DIR = Path(__file__).resolve().parent / "site"  # gitignored; `make run` serves it
CATEGORY_NAMES = ("Kitchen", "Garden", "Audio", "Outdoor", "Office", "Toys", "Lighting", "Bath")
ADJECTIVES = ("Copper", "Compact", "Classic", "Nordic", "Rugged", "Silent", "Smart", "Vintage", "Deluxe", "Urban")
NOUNS = ("Kettle", "Lamp", "Speaker", "Chair", "Planter", "Backpack", "Clock", "Blender", "Tent", "Desk")
# One price format per category, like a shop with regional sections: crawlers must not assume "$1,299.00".
PRICE_FORMATS = (lambda a: f"${a:,.2f}", lambda a: f"{a:.2f} €", lambda a: f"£{a:,.2f}")
STYLE = (
    "body{font-family:sans-serif;max-width:60rem;margin:2rem auto;color:#222}"
    ".product-card{display:inline-block;width:14rem;margin:.5rem;padding:.5rem;border:1px solid #ddd;"
    "vertical-align:top}.product-card img{width:100%}.price{font-weight:bold}"
    ".out-of-stock{color:#a00}.in-stock{color:#070}"
)


@dataclass
class Product:
    sku: str
    title: str
    price: str
    in_stock: bool
    category: Category


@dataclass
class Category:
    slug: str
    name: str
    products: list[Product] = field(default_factory=list)


def catalogue(*, categories: int = 4, products_per_category: int = 30, seed: int = 7) -> list[Category]:
    """The shop's contents: what generate_site writes and what the demo seed points sources at."""
    rng = random.Random(seed)
    result = []
    for index in range(categories):
        name = CATEGORY_NAMES[index] if index < len(CATEGORY_NAMES) else f"Category {index + 1}"
        category = Category(slug=name.lower().replace(" ", "-"), name=name)
        price_format = PRICE_FORMATS[index % len(PRICE_FORMATS)]
        for number in range(1, products_per_category + 1):
            # Some prices above a thousand, so thousands separators show up.
            amount = rng.uniform(3, 99) if rng.random() < 0.7 else rng.uniform(100, 2500)
            category.products.append(
                Product(
                    sku=f"{name[:3].upper()}-{index + 1}{number:03d}",
                    title=f"{rng.choice(ADJECTIVES)} {rng.choice(NOUNS)} {rng.randint(100, 999)}",
                    price=price_format(round(amount, 2)),
                    in_stock=rng.random() > 0.2,
                    category=category,
                )
            )
        result.append(category)
    return result


def page(title: str, body: str, *, up: str = "") -> str:
    """A whole HTML page; `up` is the relative path back to the site root ("", "../", "../../")."""
    return (
        f'<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>{escape(title)} · Demo Shop</title>'
        f"<style>{STYLE}</style></head>\n<body>\n"
        f'<header><a class="home" href="{up}index.html">Demo Shop</a></header>\n{body}\n</body></html>\n'
    )


def hub_page(shop: list[Category]) -> str:
    links = "\n".join(
        f'<li><a class="category" href="category/{c.slug}/page-1.html">{escape(c.name)}</a> '
        f"({len(c.products)} products)</li>"
        for c in shop
    )
    return page("Categories", f'<h1>Categories</h1>\n<ul class="categories">\n{links}\n</ul>')


def list_page(category: Category, products: list[Product], number: int, pages: int) -> str:
    cards = "\n".join(
        f'<div class="product-card"><a class="product-link" href="../../product/{p.sku}.html">'
        f'<img src="../../img/{p.sku}.svg" alt=""><span class="product-title">{escape(p.title)}</span></a> '
        f'<span class="price">{escape(p.price)}</span></div>'
        for p in products
    )
    nav = f'<a class="prev" href="page-{number - 1}.html">Previous</a> ' if number > 1 else ""
    nav += f'<a class="next" href="page-{number + 1}.html">Next</a>' if number < pages else ""
    body = (
        f'<h1 class="category-name">{escape(category.name)}</h1>\n<p>Page {number} of {pages}</p>\n'
        f'<div class="products">\n{cards}\n</div>\n<nav class="pagination">{nav}</nav>'
    )
    return page(f"{category.name}, page {number}", body, up="../../")


def new_arrivals(shop: list[Category]) -> list[Product]:
    """The products the script-built listing shows: the two newest (last) of each category."""
    return [product for category in shop for product in category.products[-2:]]


def new_arrivals_page() -> str:
    """A listing whose product cards a script inserts from new/products.json, as many shops build theirs: the HTML
    a crawler downloads has none of them, a rendered page has them all (docs/rendering.md)."""
    script = (
        "fetch('products.json').then((answer) => answer.json()).then((products) => {"
        "const list = document.querySelector('.products');"
        "for (const p of products) {"
        "const card = document.createElement('div'); card.className = 'product-card';"
        "const link = document.createElement('a'); link.className = 'product-link'; link.href = p.url;"
        "const title = document.createElement('span'); title.className = 'product-title'; title.textContent = p.title;"
        "const price = document.createElement('span'); price.className = 'price'; price.textContent = p.price;"
        "link.appendChild(title); card.append(link, ' ', price); list.appendChild(card);"
        "}});"
    )
    body = f'<h1>New arrivals</h1>\n<div class="products"></div>\n<script>{script}</script>'
    return page("New arrivals", body, up="../")


def new_arrivals_json(shop: list[Category]) -> str:
    cards = [
        {"sku": p.sku, "title": p.title, "price": p.price, "url": f"../product/{p.sku}.html"}
        for p in new_arrivals(shop)
    ]
    return json.dumps(cards, indent=1) + "\n"


def product_page(product: Product) -> str:
    stock = (
        '<span class="stock in-stock">In stock</span>'
        if product.in_stock
        else '<span class="stock out-of-stock">Out of stock</span>'
    )
    body = (
        f'<nav class="breadcrumbs"><a href="../index.html">Home</a> › <a class="category-name" '
        f'href="../category/{product.category.slug}/page-1.html">{escape(product.category.name)}</a></nav>\n'
        f'<h1 class="title">{escape(product.title)}</h1>\n'
        f'<img class="product-image" src="../img/{product.sku}.svg" alt="{escape(product.title)}">\n'
        f'<p>SKU: <span class="sku">{product.sku}</span></p>\n'
        f'<p><span class="price">{escape(product.price)}</span> {stock}</p>'
    )
    return page(product.title, body, up="../")


def image_svg(product: Product) -> str:
    hue = sum(map(ord, product.sku)) * 37 % 360
    return (
        '<svg xmlns="http://www.w3.org/2000/svg" width="240" height="160">'
        f'<rect width="240" height="160" fill="hsl({hue},55%,70%)"/>'
        f'<text x="120" y="88" font-size="20" text-anchor="middle">{product.sku}</text></svg>\n'
    )


def sitemap_xml(shop: list[Category], base_url: str) -> str:
    urls = "".join(f"  <url><loc>{base_url}/product/{p.sku}.html</loc></url>\n" for c in shop for p in c.products)
    head = '<?xml version="1.0" encoding="UTF-8"?>\n<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">\n'
    return f"{head}{urls}</urlset>\n"


def robots_txt(base_url: str) -> str:
    return f"User-agent: *\nAllow: /\n\nSitemap: {base_url}/sitemap.xml\n"


def generate_site(
    root: Path,
    base_url: str,
    *,
    categories: int = 4,
    products_per_category: int = 30,
    per_page: int = 10,
    seed: int = 7,
) -> None:
    """Write the shop into `root`, replacing pages an earlier generation left behind."""
    base_url = base_url.rstrip("/")
    shop = catalogue(categories=categories, products_per_category=products_per_category, seed=seed)
    root.mkdir(parents=True, exist_ok=True)
    # Only our own folders are cleared, so a mistaken --out never deletes anything else.
    for folder in ("category", "product", "img", "new"):
        shutil.rmtree(root / folder, ignore_errors=True)
    files = {
        "index.html": hub_page(shop),
        "sitemap.xml": sitemap_xml(shop, base_url),
        "robots.txt": robots_txt(base_url),
        "new/index.html": new_arrivals_page(),
        "new/products.json": new_arrivals_json(shop),
    }
    for category in shop:
        pages = max(1, -(-len(category.products) // per_page))
        for number in range(1, pages + 1):
            chunk = category.products[(number - 1) * per_page : number * per_page]
            files[f"category/{category.slug}/page-{number}.html"] = list_page(category, chunk, number, pages)
        for product in category.products:
            files[f"product/{product.sku}.html"] = product_page(product)
            files[f"img/{product.sku}.svg"] = image_svg(product)
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Write the demo shop's static pages.")
    parser.add_argument("--out", type=Path, default=SITE_DIR, help="folder to write into")
    parser.add_argument("--base-url", default="http://127.0.0.1:8001", help="address the site will be served at")
    parser.add_argument("--categories", type=int, default=4)
    parser.add_argument("--products-per-category", type=int, default=30)
    parser.add_argument("--per-page", type=int, default=10)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    generate_site(
        args.out,
        args.base_url,
        categories=args.categories,
        products_per_category=args.products_per_category,
        per_page=args.per_page,
        seed=args.seed,
    )
    print(f"demo shop written to {args.out} for {args.base_url}")


if __name__ == "__main__":
    main()
