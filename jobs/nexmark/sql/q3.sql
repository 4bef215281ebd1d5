-- Nexmark q3 (local item suggestion); the generator writes states in lower case.
SELECT p.name, p.city, p.state, a.id
FROM auction AS a INNER JOIN person AS p ON a.seller = p.id
WHERE a.category = 10 AND (p.state = 'or' OR p.state = 'id' OR p.state = 'ca')
