-- Fails on the seed: client 12 spent 4.75. A singular test, so dbt-ol reports it with the test run facet.
select client_id, total_amount
from {{ ref('customer_revenue') }}
where total_amount < 10
