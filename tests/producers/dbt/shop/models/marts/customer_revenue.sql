select
    customer_id as client_id,
    sum(amount) as total_amount,
    max(amount) * 2 as max_amount_x2,
    count(*) as order_count
from {{ ref('stg_orders') }}
group by customer_id
